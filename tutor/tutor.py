import reflex as rx

from tutor.store import TABLES

# `reflex db makemigrations` reads tables from this registry; all our tables share one
# SQLModel metadata, so registering one brings them all.
rx.ModelRegistry.register(TABLES[0])


def index() -> rx.Component:
    return rx.text("hello", id="hello")


app = rx.App()
app.add_page(index)
