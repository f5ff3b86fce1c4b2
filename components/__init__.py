"""Reflex components that render a reply. Each takes data (vars) and returns a component."""
