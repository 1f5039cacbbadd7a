"""Model tuning: a whole network in one call (:func:`tensorlang.tuner.tune_model`, in
:mod:`~tensorlang.tuner.model.tune`). Its parts: the model's tasks (:mod:`~tensorlang.tuner.model.tasks`), its
pass variants (:mod:`~tensorlang.tuner.model.variants`), where the model comes from and its torch baselines
(:mod:`~tensorlang.tuner.model.source`, :mod:`~tensorlang.tuner.model.baselines`), one search per task
(:mod:`~tensorlang.tuner.model.task_search`), the runners (:mod:`~tensorlang.tuner.model.runners`), the task scheduler
(:mod:`~tensorlang.tuner.model.task_scheduler`), progress (:mod:`~tensorlang.tuner.model.progress`) and the summary
(:mod:`~tensorlang.tuner.model.report`).

Example::

    from tensorlang.tuner import tune_model
    summary = tune_model("resnet18.pt2", trials=2000, db="resnet18.db")
"""
