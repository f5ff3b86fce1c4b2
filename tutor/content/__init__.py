"""What authors write: the module format (pydantic, published as JSON Schema), loading and
checking module files with file:line messages, and their checks and sources.

May import risk (a module's safety changes), teach.intent_bank, contract and storage's
settings; never teach's flow, turns or web.
"""
