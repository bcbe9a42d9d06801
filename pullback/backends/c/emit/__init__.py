"""Emit: loop IR printed as C."""
