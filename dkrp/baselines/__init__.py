"""Data-dependent feature maps built from sampled landmarks (Nyström, KG-RP)."""

__all__: list[str] = []
