"""Call: a built module called from Python, and what it may take of the machine."""
