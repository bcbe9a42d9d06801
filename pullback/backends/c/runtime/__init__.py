"""The runtime in C: headers every generated module includes, and the libraries beside it
(the Python side of calls, small and packed products, LAPACK calls), built once per machine."""
