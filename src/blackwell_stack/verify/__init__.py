"""verify: a running server checked from outside (`smoke`: garbage answers; `bench`: throughput and latency;
`accuracy`: GSM8K), and the acceptance run that checks the GPU host whole."""
