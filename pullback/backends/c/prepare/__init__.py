"""Prepare: graph-IR rewrites the C backend makes before planning."""
