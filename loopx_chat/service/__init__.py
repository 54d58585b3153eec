"""The local service: loopback HTTP API, status feed and first-screen page.

`security` decides what requests are allowed (pure), `app` maps routes to the controller,
`events` fans a turn's progress out to SSE listeners, `page` renders the first screen (pure),
`server` is the HTTP shell. It is the controller's front door, never a second console.
"""
