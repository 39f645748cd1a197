"""journeyman as an Agent Client Protocol agent (`journeyman acp`): editors such as Zed drive
it over stdio. `server` answers the protocol, `updates` turns runs into session updates,
`launch` builds each session's agent with the command line's trust rules, `stdio` serves it.
Needs the optional `agent-client-protocol` package (`pip install 'journeyman[acp]'`)."""
