"""One thin module per DVC stage: parse params, call pipeline, write outputs."""
