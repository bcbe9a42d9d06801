"""Loop IR (buffers, loop nests with scalar bodies, library calls, structured control
flow) and the passes over it."""
