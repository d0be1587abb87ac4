"""The web edge of the project: URL and WebSocket routing and the ASGI entry point."""
