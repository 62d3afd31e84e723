// The engine: elaborates the pod, runs it and collects results (filled in by the chip model work).
