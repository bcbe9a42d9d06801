"""Staging Python source into graph IR (DESIGN §4)."""
