"""AWS: the session, images, the model archive, deployment, the training job, the checklist."""

import logging

# the SDK logs "Not applying SDK defaults from location ..." at INFO on each resource call
logging.getLogger("sagemaker.config").setLevel(logging.WARNING)
