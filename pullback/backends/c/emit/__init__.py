"""Emit: loop IR printed as C, with the entry through which Python calls the module."""
