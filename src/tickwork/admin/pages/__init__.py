"""The console's HTML pages, one module per page (or per resource), rendered from the page
objects of :mod:`tickwork.admin.reads`. Everything goes through :func:`html.el`, which escapes
text and attributes: job payloads, errors, names and audit reasons are user data and stay
inert. :mod:`.layout` holds what the pages share."""

from tickwork.admin.pages import audit, jobs, layout, login, overview, schedules

__all__ = ["audit", "jobs", "layout", "login", "overview", "schedules"]
