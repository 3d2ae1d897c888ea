"""verify: a running server checked from outside (`smoke`: garbage answers; `bench`: throughput and latency)."""
