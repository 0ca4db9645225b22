from .configuration_vete import VETEConfig
from .modeling_vete import VETEModel, VETEOutput, VETEPreTrainedModel, pearson_loss

__all__ = ["VETEConfig", "VETEModel", "VETEOutput", "VETEPreTrainedModel", "pearson_loss"]
