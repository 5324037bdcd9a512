"""What the engine oracles share: executing and lifting engine source (:mod:`.lift`), strict
stand-ins (:mod:`.strict`) and access to the fetch tools (:mod:`.tools`)."""
