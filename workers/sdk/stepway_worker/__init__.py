"""Stepway worker SDK (talks to the Task API over HTTP only)."""
