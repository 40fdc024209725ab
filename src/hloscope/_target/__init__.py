"""Hardware targets (GPU and TPU chips) for compiling without the hardware."""
