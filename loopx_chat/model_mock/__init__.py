"""A loopback mock of the model API (the Responses API), for the demo, the tests and the
benchmarks: codex runs against it offline. It is never used to drive a real Codex home's
model traffic, and the codex adapter never imports it."""
