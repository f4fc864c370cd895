"""Stand-ins: offline replacements for AWS and for the AWS serving container.

A stand-in lets the notebooks, the tests and a workshop run the real code path without an AWS
account or Docker: the product's code talks to it exactly as it would to AWS or to the
container. The core does not need a stand-in to work: the tests and the notebooks choose one.

* :mod:`~pt2aws.emulator.server`: a moto server on 127.0.0.1 as the AWS control plane
  (S3, SageMaker, EC2, SSM, Application Auto Scaling, Service Quotas), and ``start``, which a
  notebook calls when it chooses the emulator: it returns the same
  :class:`pt2aws.aws.session.AwsSession` an AWS account gets, with the emulator's hooks;
* :mod:`~pt2aws.emulator.patches`: the few patches moto needs for what pt2aws uses;
* :mod:`~pt2aws.emulator.endpoints`: what answers an emulated endpoint (its image's
  serving software on this machine, started by ``CreateEndpoint``);
* :mod:`~pt2aws.standins.torchserve`: ``LocalEndpoint``, the SageMaker PyTorch toolkit +
  TorchServe on 127.0.0.1 (what the AWS deep learning container runs);
* :mod:`~pt2aws.standins.ts_launcher`: the script that starts that stack outside the container;
* :mod:`~pt2aws.standins.asgi_local`: ``AsgiEndpoint``, the serving image's own server
  (:mod:`pt2aws.serving.server`) on 127.0.0.1;
* :mod:`~pt2aws.standins.serving_check`: notebook 02's check that the real stack answers as the
  handler does in this process.
"""
