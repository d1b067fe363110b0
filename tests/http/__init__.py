"""The FastAPI surface (relay/http/) on a real uvicorn: /chat, /agui, ids, the OpenAPI
contract, operations.
"""
