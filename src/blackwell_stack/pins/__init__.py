"""pins"""
