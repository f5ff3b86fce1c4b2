"""The Reflex app: pages and routes. Everything else lives in the core and components."""

import reflex as rx

import tutor.storage.store  # noqa: F401  (its tables)
from components.auth import signin_page, signup_page
from components.chat import chat_page
from components.connection import connection_overlay
from components.home import home_page
from components.operator import operator_page
from components.theme import theme_head_script
from tutor.turns.runtime import engine_at_start
from tutor.web.auth_routes import auth_api
from tutor.web.auth_state import AuthPageState
from tutor.web.home_state import HomeState
from tutor.web.identity_gate import IdentityGate
from tutor.web.operator_routes import operator_api
from tutor.web.operator_state import OperatorState
from tutor.web.state import ChatState
from tutor.web.web_security import security_headers, socket_origin_guard

# `reflex db makemigrations` reads tables from Reflex's model registry. rx.Model, registered
# there already, shares one SQLModel metadata with all our tables, so it brings them all;
# registering one of ours as well made Reflex copy every table twice (a warning each).

# The theme script goes in <head>: it picks light or dark before the first paint.
# Sign-in, sign-up and sign-out are plain form posts (tutor/web/auth_routes.py) that set an
# HttpOnly cookie.
app = rx.App(stylesheets=["/tutor.css"], theme=None, head_components=[theme_head_script()],
             api_transformer=[auth_api(), operator_api(), security_headers, socket_origin_guard])
# Every event is checked for who sends it before it runs; a tab's state is reset when its
# identity changed (signed out, somebody else signed in on this tab, an account disabled).
app.add_middleware(IdentityGate())
# A calm "connection lost" line instead of Reflex's toast naming the socket's address.
app.app_wraps[(5, "Overlay")] = connection_overlay
# Each worker builds the engine before it serves (off the event loop).
app.register_lifespan_task(engine_at_start)
app.add_page(home_page, route="/", title="Tutor", on_load=HomeState.load)
app.add_page(chat_page, route="/learn", title="Tutor — learning", on_load=ChatState.load)
app.add_page(signin_page, route="/signin", title="Tutor — sign in", on_load=AuthPageState.load)
app.add_page(signup_page, route="/signup", title="Tutor — create an account", on_load=AuthPageState.load)
# The operator console; its CSV export is an HTTP route that checks the session itself.
app.add_page(operator_page, route="/operator", title="Tutor — operator console", on_load=OperatorState.load)
