"""Optimisers as pure functions of pytrees (``pb.optim``), in the style of Optax: a
``GradientTransformation`` is a pair ``init(params) -> state`` and
``update(updates, state, params) -> (updates, state)``; ``apply_updates`` adds them to
the parameters.  Leaves without a gradient (None: integer, static or frozen ones) are
left as they are."""
