"""One construct per capability; ``infra.stack`` composes them."""
