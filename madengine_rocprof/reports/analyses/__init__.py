"""Report analyses, one question per module: collectives, efficiency, idle time, launch latency."""
