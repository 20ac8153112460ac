"""The detached Local runner (``python -m ganga_like_local.runner``) and its client.

Kept free of imports: the runner process imports this package first and must not import
``ganga_like``; submitting processes use ``client``.
"""
