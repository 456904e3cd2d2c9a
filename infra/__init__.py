"""Punctual's AWS CDK app: ``python -m infra.app`` (what ``npx cdk synth`` runs, see cdk.json).

Layout (one construct per capability, the stack only composes them):

- ``config``: context parameters -> one validated pydantic model, with the sizing reasoning.
- ``constants``: names, paths, runtime, per-function sizes; nothing here reads context.
- ``layer_build``: the third-party dependency layer, pip-installed for Lambda's platform
  (manylinux aarch64) without Docker and cached by a hash of what goes into it.
- ``constructs/``: storage, dispatch, layers, functions, api, scheduler, workers, fargate,
  reaper, alerts, observability, access (least-privilege grants), nag (acknowledgements).
- ``stack``: composes the constructs; ``app``: builds the app and adds the cdk-nag checks.
"""

import os

# jsii (the bridge to aws-cdk-lib's JavaScript) prints a full-screen banner on every start when
# Node 20 runs it; Node 20 is the documented toolchain here (docs/deploy.md), so say it once there.
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
