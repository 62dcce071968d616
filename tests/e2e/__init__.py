"""End-to-end tests through a real browser (headless Chromium from Debian, driven by Playwright)."""
