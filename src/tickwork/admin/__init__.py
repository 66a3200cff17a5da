"""The admin console and its JSON API (``tickwork admin``).

``server`` builds the aiohttp application; ``auth`` and ``security`` keep it closed
(credentials, roles, sessions, CSRF, headers); ``reads`` and ``actions`` are what it does
with the database; ``pages`` renders HTML through ``html``, which escapes by construction;
``views`` and ``api`` are the request handlers, one HTML page and one JSON answer per view.
"""
