"""Helpers for the browser tests: a throwaway Jupyter server and Playwright steps."""
