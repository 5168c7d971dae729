"""Moved to :mod:`pylog.common.metrics.sampled_stat` (the network layer's
ConnectionQuotas measures with it too); kept so existing imports still work."""

from pylog.common.metrics.sampled_stat import Avg, Rate, SampledStat

__all__ = ["Avg", "Rate", "SampledStat"]
