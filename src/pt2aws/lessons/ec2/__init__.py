"""The EC2 route of notebook 00 (a lesson: the notebooks' main path trains on this machine or as
a SageMaker job).

* :mod:`~pt2aws.lessons.ec2.plan`: the launch plan for a chosen instance (DLAMI, EC2 request,
  SageMaker training and endpoint settings) and its ``DryRun``;
* :mod:`~pt2aws.lessons.ec2.run`: train inside the AWS training DLC on a DLAMI instance, the
  commands sent through SSM Run Command.
"""
