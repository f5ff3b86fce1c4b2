"""The Reflex app: pages and routes. Everything else lives in the core and components."""

import reflex as rx

from components.chat import chat_page
from components.home import home_page
from tutor.home_state import HomeState
from tutor.state import ChatState
from tutor.store import TABLES

# `reflex db makemigrations` reads tables from this registry; all our tables share one
# SQLModel metadata, so registering one brings them all.
rx.ModelRegistry.register(TABLES[0])

app = rx.App(stylesheets=["/tutor.css"], theme=None)
app.add_page(home_page, route="/", title="Tutor", on_load=HomeState.load)
app.add_page(chat_page, route="/learn", title="Tutor — learning", on_load=ChatState.load)
