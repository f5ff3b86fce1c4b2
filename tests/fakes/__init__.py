"""Test doubles that are real servers: loopback HTTP endpoints in the providers' formats."""
