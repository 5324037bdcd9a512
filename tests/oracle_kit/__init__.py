"""What the engine oracles share: executing and lifting engine source (:mod:`.lift`), strict
stand-ins (:mod:`.strict`), the stand-in for a checkpoint's remote config class
(:mod:`.remote_code`) and access to the fetch tools (:mod:`.tools`)."""
