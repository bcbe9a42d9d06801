"""Lower: graph IR to loop IR, one handler per op, reading the plan."""
