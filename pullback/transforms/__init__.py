"""IR-to-IR transforms: forward mode (``jvp``), reverse mode (``vjp``), and the
normalisation they rely on (``closure``)."""
