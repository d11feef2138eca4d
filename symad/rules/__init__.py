"""Rule tables registered onto the primitives, one table per transform.

The symbolic partial derivatives live beside each primitive in
:mod:`symad.primitives` (they define the primitive as much as its NumPy
implementation does); :mod:`symad.rules.taylor` holds the Taylor-coefficient
recurrences for the primitives that have a closed form cheaper or more
robust than the generic chain rule on series.
"""
