"""Test servers and fixtures shared by the integration tests and the example tests."""
