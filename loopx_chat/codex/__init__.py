"""The Codex adapter: the only code that finds and spawns the codex binary.

`binary` finds the executable (native binary behind the npm wrapper), `app_server` owns one
app-server process and its JSON-RPC stream, `thread` opens/resumes threads and runs turns
(with the catalog-compatibility retry), `mock_responses` is the loopback model mock the demo
and tests point codex at.
"""
