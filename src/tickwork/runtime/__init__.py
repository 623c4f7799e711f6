"""Small runtime helpers shared by the scheduler, workers and the wiring: batching, supervision."""
