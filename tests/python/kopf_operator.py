"""A small kopf operator for tests/tests/kopf.rs: create/update/delete handlers on
widgets.example.com/v1 that patch status and labels, as operators commonly do.

Run with `kopf run --standalone --namespace default tests/python/kopf_operator.py`.
"""
import kopf


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_):
    # Events: kopf posts what the handlers ask for (kopf.info below) as core/v1 Events;
    # tests/tests/kopf.rs reads them back and with `kubectl get events`.
    settings.watching.server_timeout = 30


@kopf.on.create("example.com", "v1", "widgets")
def create_fn(body, spec, patch, **_):
    kopf.info(body, reason="Handled", message="widget created and labelled")
    patch.metadata.labels["handled"] = "created"
    patch.status["phase"] = "Created"
    return {"n": spec.get("n")}


@kopf.on.update("example.com", "v1", "widgets")
def update_fn(spec, patch, **_):
    # (The label the create handler set is itself a change kopf hands to this handler.)
    patch.status["phase"] = "Updated"
    return {"n": spec.get("n")}


@kopf.on.delete("example.com", "v1", "widgets")
def delete_fn(name, logger, **_):
    logger.info(f"cleaning up {name}")
