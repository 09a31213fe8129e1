"""The API's JSON parser: DRF's, refusing bodies nested deeper than ``portal.jsonbody.MAX_DEPTH``."""

from __future__ import annotations

import io

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from portal.jsonbody import depth_over_limit, nesting_depth, too_deep_message


class DepthLimitedJSONParser(JSONParser):
    """``portal.middleware.RefuseDeepJson`` refuses such bodies before authentication; this
    guards ``request.data`` wherever the middleware is not in the way (a view called
    directly, a settings change that drops it)."""

    def parse(self, stream, media_type=None, parser_context=None):
        raw = stream.read() if stream is not None else b""
        depth = depth_over_limit(raw)
        if depth:
            raise ParseError(too_deep_message(depth))
        try:
            return super().parse(io.BytesIO(raw), media_type, parser_context)
        except RecursionError:
            # Not reachable with MAX_DEPTH far below the recursion limit; kept so that a
            # miscounted body is still a 400 and never a 500.
            raise ParseError(too_deep_message(nesting_depth(raw))) from None
