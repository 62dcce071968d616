"""HTTP API and web dashboard: create_api(services) in app.py; routers/ per surface; pages.py for the HTML."""
