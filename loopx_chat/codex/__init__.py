"""The Codex adapter: the only code that finds and spawns the codex binary.

`binary` finds the executable (native binary behind the npm wrapper), `app_server` owns one
app-server process and its JSON-RPC stream, `thread` opens/resumes threads and runs turns
(with the catalog-compatibility retry). The loopback model mock the demo and tests point
codex at lives in its own room, `loopx_chat.model_mock`.
"""
